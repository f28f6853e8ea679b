"""An index entry given another blob id, its stat data kept: git then takes the changed file on disk
for the blob it names (tests/agents/index_agent.py, tests/test_gate.py)."""
import hashlib
import struct
from pathlib import Path


def forge_entry(index: Path, name: str, blob: str) -> None:
    """Give the index entry `name` the blob id `blob`, its stat data left as it is, and the index a
    checksum to match."""
    data = bytearray(index.read_bytes())
    assert data[:4] == b"DIRC" and struct.unpack(">I", data[4:8])[0] == 2
    at = 12
    for _ in range(struct.unpack(">I", data[8:12])[0]):
        length = struct.unpack(">H", data[at + 60:at + 62])[0] & 0xFFF
        if data[at + 62:at + 62 + length] == name.encode():
            data[at + 40:at + 60] = bytes.fromhex(blob)
        at += (62 + length + 8) & ~7
    body = bytes(data[:-20])
    index.write_bytes(body + hashlib.sha1(body).digest())
