"""Small helpers the analysis modules share: reading a file's text and JSON, a scenario's loads."""
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
    """The run records of an asa-gru-compare runs.json: its 'runs' list, or the list itself."""
    return data['runs'] if isinstance(data, dict) else data


def scenario_loads(scenario):
    """The background loads of a scenario of a report (`report.json` of `asa scenario report`),
    sorted: named by its runs' `value:load:<name>` score parts (two or more for a phased one)."""
    return sorted({p.split(':', 2)[2] for r in scenario['runs'] for p in r.get('parts', {})
                   if p.startswith('value:load:')})


def print_and_dump(text, data, json_path=None):
    """Prints a module's table and, when `json_path` is given (its --json), writes its data
    there as indented JSON."""
    print(text)
    if json_path:
        with open(json_path, 'w') as f:
            json.dump(data, f, indent=1)
