"""Small helpers the analysis modules share: reading a file's text and JSON."""
import json


def read_text(path):
    """The whole text of a file, undecodable bytes replaced (guest logs may hold any)."""
    with open(path, errors='replace') as f:
        return f.read()


def read_json(path):
    """A JSON file's data."""
    with open(path) as f:
        return json.load(f)


def runs_of(data):
    """The run records of a vm_compare runs.json: its 'runs' list, or the list itself."""
    return data['runs'] if isinstance(data, dict) else data
