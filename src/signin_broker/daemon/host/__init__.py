"""How the daemon lives on the machine: one instance, its socket, the service manager."""
