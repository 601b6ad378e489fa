"""A PEP 517 build backend in the source tree, standard library only, so `pip install
./python` works offline (no setuptools or wheel to download into an isolated build)."""

import base64
import hashlib
import os
import tarfile
import zipfile

NAME = "gantry_client"
DIST = "gantry-client"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))
METADATA = f"""Metadata-Version: 2.1
Name: {DIST}
Version: {VERSION}
Summary: Python SDK for the Gantry GPU cluster manager (standard library only)
Requires-Python: >=3.9
License: Apache-2.0
"""
WHEEL = f"""Wheel-Version: 1.0
Generator: {NAME} build_backend
Root-Is-Purelib: true
Tag: py3-none-any
"""


def _sources():
    package = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            yield f"{NAME}/{name}", os.path.join(package, name)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = f"{NAME}-{VERSION}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for name, text in (("METADATA", METADATA), ("WHEEL", WHEEL)):
        with open(os.path.join(metadata_directory, info, name), "w", encoding="utf-8") as f:
            f.write(text)
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{NAME}-{VERSION}.dist-info"
    wheel_name = f"{NAME}-{VERSION}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as whl:
        entries = [(arc, open(path, "rb").read()) for arc, path in _sources()]
        entries += [(f"{info}/METADATA", METADATA.encode()), (f"{info}/WHEEL", WHEEL.encode()),
                    (f"{info}/top_level.txt", f"{NAME}\n".encode())]
        for arc, data in entries:
            whl.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{arc},sha256={digest},{len(data)}")
        records.append(f"{info}/RECORD,,")
        whl.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{DIST}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for arc in ("pyproject.toml", "build_backend.py", "README.md"):
            tar.add(os.path.join(HERE, arc), f"{base}/{arc}")
        for arc, path in _sources():
            tar.add(path, f"{base}/{arc}")
    return name
