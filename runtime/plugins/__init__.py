"""The plugin system: the plugin API (``api``), the catalog of every plugin kind, ConfigDef and connector
configs."""
