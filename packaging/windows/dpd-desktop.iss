; Inno Setup 6 script for DPD Desktop (UNTESTED: written on Linux). build-windows.ps1 passes the defines:
;   ISCC /DAppVersion=0.1.0 /DSourceDir=...\build\pkg\dist\dpd-desktop /DOutputDir=...\build\pkg
;        /DIconFile=...\resources\icon.ico packaging\windows\dpd-desktop.iss
; Installs the one-folder bundle under Program Files\DPD Desktop (per user without admin rights when chosen), a
; Start-menu entry for the windowed executable, optionally dpd-desktop.exe's folder on the user's PATH. Uninstall
; removes every installed file; the user's workspace (%LOCALAPPDATA%\dpd-desktop) is left alone.
#ifndef AppVersion
  #define AppVersion "0.0.0"
#endif
#define AppName "DPD Desktop"

[Setup]
AppId={{6E4B5C1A-3F0D-4C7B-9A52-D9D0E5B6A1C3}
AppName={#AppName}
AppVersion={#AppVersion}
AppVerName={#AppName} {#AppVersion}
AppPublisher=DPD Desktop developers
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir={#OutputDir}
OutputBaseFilename=dpd-desktop-{#AppVersion}-setup
SetupIconFile={#IconFile}
UninstallDisplayIcon={app}\{#AppName}.exe
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
ChangesEnvironment=yes

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; Flags: unchecked
Name: "addtopath"; Description: "Add the dpd-desktop command to PATH"; Flags: unchecked

[Files]
Source: "{#SourceDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{group}\{#AppName}"; Filename: "{app}\{#AppName}.exe"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppName}.exe"; Tasks: desktopicon

[Registry]
Root: HKCU; Subkey: "Environment"; ValueType: expandsz; ValueName: "Path"; ValueData: "{olddata};{app}"; \
  Tasks: addtopath; Check: NeedsAddPath(ExpandConstant('{app}'))

[Run]
Filename: "{app}\{#AppName}.exe"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent

[UninstallDelete]
; bytecode or caches a run may have left beside the bundle (never the workspace, which lives in the user's folder)
Type: filesandordirs; Name: "{app}\_internal\__pycache__"

[Code]
function NeedsAddPath(Dir: string): Boolean;
var
  Paths: string;
begin
  if not RegQueryStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Paths) then
    Paths := '';
  Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Paths) + ';') = 0;
end;
