"""`aam` commands, one module each (`aam foo-bar` is ``aam.commands.foo_bar``): arguments in,
typed values to the library (``aam.data``, ``aam.unifrac``, ``aam.training``, ...) out."""
