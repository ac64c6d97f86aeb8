"""Who is calling: the kernel's word on each connection, the app it is, its pins."""
