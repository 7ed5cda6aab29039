"""The `--inject` presets, one file each; `replay/fault_registry.py` imports every module here (each registers itself)."""
