# Windows bundle and installer for DPD Desktop. UNTESTED: written on Linux, where it cannot run.
#   powershell -ExecutionPolicy Bypass -File packaging\build-windows.ps1 [-Python py] [-CudaIndex URL]
# Makes a fresh venv (build\pkg-venv), installs torch (CPU build unless -CudaIndex), the app and PyInstaller, runs the
# recipe (packaging\dpd-desktop.spec: one folder, build\pkg\dist\dpd-desktop\ with dpd-desktop.exe for the
# command line and "DPD Desktop.exe" without a console for the Start menu), checks it with --self-test, then builds
# build\pkg\dpd-desktop-<version>-setup.exe with Inno Setup 6 (ISCC.exe on PATH or in its default folder).
# Traps handled in packaging\entry.py: torch\lib is added with os.add_dll_directory, and torch is imported before Qt
# (c10.dll fails to load when torch comes after Qt on some builds: pytorch#166628).
param(
    [string]$Python = "py",
    # CUDA variant (README "CUDA variant"): the URL of PyTorch's CUDA wheel index for torch 2.13.0 (pytorch.org's
    # install selector gives it); without it torch is the package registry's Windows wheel, a CPU build
    [string]$CudaIndex = ""
)
$ErrorActionPreference = "Stop"
Set-Location (Split-Path -Parent $PSScriptRoot)

$init = Get-Content dpd_desktop\__init__.py -Raw
if ($init -notmatch '__version__\s*=\s*"([^"]+)"') { throw "no __version__ in dpd_desktop\__init__.py" }
$Version = $Matches[1]

$Venv = "build\pkg-venv"
if (Test-Path $Venv) { Remove-Item -Recurse -Force $Venv }
& $Python -m venv $Venv
$Py = "$Venv\Scripts\python.exe"
& $Py -m pip install -q --upgrade pip
if ($CudaIndex) {
    & $Py -m pip install -q torch==2.13.0 --index-url $CudaIndex
    $env:DPD_CUDA = "1"  # lets the recipe collect torch's CUDA libraries (it refuses them otherwise)
} else {
    & $Py -m pip install -q torch==2.13.0
}
& $Py -m pip install -q . "pyinstaller>=6.10"
if ($LASTEXITCODE -ne 0) { throw "pip install failed" }

& "$Venv\Scripts\pyinstaller.exe" --noconfirm --log-level WARN --distpath build\pkg\dist --workpath build\pkg\work `
    packaging\dpd-desktop.spec
if ($LASTEXITCODE -ne 0) { throw "PyInstaller failed" }

$env:QT_QPA_PLATFORM = "offscreen"
& build\pkg\dist\dpd-desktop\dpd-desktop.exe --self-test
if ($LASTEXITCODE -ne 0) { throw "the bundle's --self-test failed" }
Remove-Item Env:\QT_QPA_PLATFORM

$Iscc = (Get-Command ISCC.exe -ErrorAction SilentlyContinue).Source
if (-not $Iscc) { $Iscc = "${env:ProgramFiles(x86)}\Inno Setup 6\ISCC.exe" }
if (-not (Test-Path $Iscc)) { throw "Inno Setup 6 (ISCC.exe) not found: install it from jrsoftware.org" }
& $Iscc "/DAppVersion=$Version" "/DSourceDir=$PWD\build\pkg\dist\dpd-desktop" "/DOutputDir=$PWD\build\pkg" `
    "/DIconFile=$PWD\resources\icon.ico" packaging\windows\dpd-desktop.iss
if ($LASTEXITCODE -ne 0) { throw "Inno Setup failed" }
Get-ChildItem build\pkg\*.exe | ForEach-Object { "{0}  {1:N0} MB" -f $_.Name, ($_.Length / 1MB) }
