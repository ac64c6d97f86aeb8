"""Generates the gRPC and protobuf modules from proto/ whenever the package is built.

The generated code is never committed: a wheel, an sdist build and an editable
install all run this hook, so `pip install .` on a fresh machine yields a working
package. Run it directly (`python hatch_build.py`) after editing a .proto file.

Beside the modules it writes `<name>.protoset`, the files compiled with their comments
(protoc's source info, a FileDescriptorSet): the site's API reference is drawn from it,
so `pip install '.[docs]'` builds the site with no protobuf compiler installed, and
grpcurl takes it (`-protoset`) where a daemon's reflection cannot be reached.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parent
PROTO_ROOT = ROOT / "proto"
OUT_ROOT = ROOT / "src"


def _plugin_script(folder: Path, name: str, function: str) -> Path:
    """A protoc plugin launcher bound to this interpreter, so PATH does not matter."""
    script = folder / name
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom mypy_protobuf.main import {function}\n"
        f"sys.exit({function}())\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _put(target: Path, content: bytes) -> None:
    """Write a generated file only when it changed, and by a rename.

    Builds run beside what reads these files (the tests, mypy, the site's build): a
    reader finds the old file or the new one, never one half written.
    """
    if target.exists() and target.read_bytes() == content:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{target.name}."
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=prefix, delete=False) as new:
        new.write(content)
    written = Path(new.name)
    written.chmod(0o644)
    written.replace(target)


def generate() -> list[Path]:
    """Run protoc over every .proto file; returns the generated files (and the copies)."""
    from grpc_tools import protoc

    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    well_known = Path(protoc.__file__).parent / "_proto"
    generated = []
    with tempfile.TemporaryDirectory() as tmp:
        mypy_plugin = _plugin_script(Path(tmp), "protoc-gen-mypy", "main")
        mypy_grpc_plugin = _plugin_script(Path(tmp), "protoc-gen-mypy_grpc", "grpc")
        staged = Path(tmp) / "out"
        staged.mkdir()
        args = [
            "grpc_tools.protoc",
            f"--proto_path={PROTO_ROOT}",
            f"--proto_path={well_known}",
            f"--plugin=protoc-gen-mypy={mypy_plugin}",
            f"--plugin=protoc-gen-mypy_grpc={mypy_grpc_plugin}",
            f"--python_out={staged}",
            f"--grpc_python_out={staged}",
            f"--mypy_out={staged}",
            f"--mypy_grpc_out={staged}",
            *protos,
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {protos}")
        for proto in protos:
            described = [
                "grpc_tools.protoc",
                f"--proto_path={PROTO_ROOT}",
                f"--proto_path={well_known}",
                "--include_source_info",
                f"--descriptor_set_out={staged / proto.removesuffix('.proto')}.protoset",
                proto,
            ]
            if protoc.main(described) != 0:
                raise RuntimeError(f"protoc failed on {proto}")
        for proto in protos:
            stem = proto.removesuffix(".proto")
            for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi", ".protoset"):
                made = f"{stem}{suffix}"
                _put(OUT_ROOT / made, (staged / made).read_bytes())
                generated.append(OUT_ROOT / made)
            # The .proto itself ships beside its modules, for apps in other languages
            # (`signin-broker proto` prints where).
            _put(OUT_ROOT / proto, (PROTO_ROOT / proto).read_bytes())
            generated.append(OUT_ROOT / proto)
    return generated


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script outside a build
    pass
else:

    class ProtoBuildHook(BuildHookInterface):  # type: ignore[type-arg]
        """Hatch hook: generate, then ship the (git-ignored) generated files."""

        PLUGIN_NAME = "custom"

        def initialize(self, version: str, build_data: dict[str, Any]) -> None:
            generated = generate()
            if version == "editable":  # the editable install imports straight from src/
                return
            for path in generated:
                build_data["force_include"][str(path)] = os.fspath(path.relative_to(OUT_ROOT))


if __name__ == "__main__":
    for path in generate():
        print(path.relative_to(ROOT))
