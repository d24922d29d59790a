"""The sandbox box: the SDK's box server driven by LangHost (`server.py`), each conversation's
workspace, commands and files in it (`services.py`)."""
