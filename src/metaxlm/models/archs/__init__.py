"""Model architectures by name (`model.arch`): one file each, registered with `@ARCHS.register("name")`."""
