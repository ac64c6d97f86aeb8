"""The bundled `signin-broker` command, so people and shell scripts use the daemon without code."""
