"""The error every layer raises for bad input: the CLI prints it as one line (naming the file
and the problem) and exits with code 2. Its own module so that anything may raise it without
importing the artifacts layer or the sandbox."""


class InputError(Exception):
    """Bad arguments or unreadable input: the CLI prints one line and exits with code 2."""
