import pytest

from analysis.sizes import format_size, parse_size, parse_sizes


@pytest.mark.parametrize("text,value", [
    ("4096", 4096), ("4K", 4096), ("4k", 4096), ("4KiB", 4096), ("4KB", 4096), ("1M", 1 << 20),
    ("1MiB", 1 << 20), ("64M", 64 << 20), ("8", 8), (" 256 ", 256), ("100", 100), ("16K", 16384),
])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text,needle", [
    ("0", "out of range"), ("-1", "not a byte count"), ("7", "out of range"),
    ("1e12", "not a byte count"), ("abc", "not a byte count"), ("", "not a byte count"),
    ("65M", "out of range"), ("1G", "out of range"), ("4X", "unknown unit"), ("4.5K", "not a byte count"),
    ("99999999999999999999", "out of range"),
])
def test_parse_size_rejects(text, needle):
    with pytest.raises(ValueError) as e:
        parse_size(text)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_parse_sizes_sorted_unique():
    assert parse_sizes("64K,256,4K,4096,1K") == [256, 1024, 4096, 65536]


@pytest.mark.parametrize("text", ["", ",", "4K,,8K", "4K,abc"])
def test_parse_sizes_rejects(text):
    with pytest.raises(ValueError):
        parse_sizes(text)


@pytest.mark.parametrize("value,text", [(256, "256"), (1024, "1K"), (4096, "4K"), (65536, "64K"),
                                        (1 << 20, "1M"), (1536, "1536"), (8, "8")])
def test_format_size(value, text):
    assert format_size(value) == text
    assert parse_size(text) == value
