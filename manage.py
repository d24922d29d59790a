#!/usr/bin/env python
import os
import sys


def main():
    from langhost.base.process_secrets import take_secrets

    take_secrets()  # before anything else can read or pass them on
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "langhost.settings")
    from django.core.management import execute_from_command_line

    from langhost.base import data_dir

    data_dir.prepare()

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
