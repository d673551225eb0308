"""Which addresses a CPU launch looks up for its pointer tables (`backends/cpu/host_ranges.py`):
the tables' distinct values outside the argument buffers and the null page; None (every
live array instead) when a table cannot be read as addresses or is too large."""
import numpy as np

from tegula.backends.cpu import host_ranges


def test_addresses_outside_the_arguments_are_looked_up():
    table = np.array([0, 8, 0x10000, 0x20010, 0x10000, 0x30000], np.int64)
    ranges = [(0x20000, 0x20100)]  # an argument buffer holding one table entry
    got = host_ranges.table_addresses([0], [True], [table], ranges)
    assert got == {0x10000, 0x30000}


def test_a_scalar_argument_is_one_address():
    got = host_ranges.table_addresses([1], [True, False], [np.zeros(4, np.int64), 0x50000], [])
    assert got == {0x50000}


def test_tables_that_are_not_addresses_mean_every_array():
    assert host_ranges.table_addresses([0], [True], [np.zeros(4, np.int32)], []) is None
    big = np.arange(host_ranges._MOST_ENTRIES + 1, dtype=np.int64) * 64 + 0x100000
    assert host_ranges.table_addresses([0], [True], [big], []) is None
    many = np.arange(host_ranges._MOST_ADDRESSES + 1, dtype=np.int64) * 64 + 0x100000
    assert host_ranges.table_addresses([0], [True], [many], []) is None


def test_no_tables_no_lookups(monkeypatch):
    def walk():
        raise AssertionError("walked every object")
    monkeypatch.setattr(host_ranges, "all_host_arrays", walk)
    assert host_ranges.host_ranges([], [True], [np.zeros(2, np.int64)], []) == []
