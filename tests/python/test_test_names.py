"""pytest imports every test file by its basename (the test folders are not packages): two
files of one name in different folders stop the whole collection with "import file
mismatch". Every test file's name is unique under tests/."""
import collections
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent.parent


def test_every_test_file_name_is_unique():
    seen = collections.defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        seen[path.name].append(str(path.relative_to(TESTS)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}
