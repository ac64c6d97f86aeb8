"""`signin-broker tui`: the broker on a full-screen terminal, for machines without a desktop.

An optional extra (`signin-broker[tui]`, prompt_toolkit): the one-shot commands never
import it. Only `app` imports prompt_toolkit; `board` and `screen` are plain Python, so
what the screen shows is tested without a terminal.
"""
