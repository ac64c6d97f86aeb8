"""The signin-brokerd process, which serves one user's sign-in and tokens to the apps it lets in."""
