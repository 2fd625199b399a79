"""Offline capture analysis (no Qt, no PyTorch): the dataset inspector and the capture import.

    inspect_dataset(ds, frame_length=None) -> CaptureReport     # analysis/inspect.py
    import_capture(x_file, y_file, out, ...) -> ImportResult    # analysis/capture_import.py
"""
