"""The bundled `signin-broker` command, built on the client SDK."""
