#!/usr/bin/env python3
"""Ray's own message definitions, per release, for the fields the GCS reader
(internal/raygcs) decodes: read from the descriptors each release's wheel
ships (ray/core/generated/*_pb2.py), written as one JSON file per release
under internal/raygcs/testdata/descriptors/. The unit test
TestReaderAgainstEachReleasesDescriptors builds replies from them by field
name and decodes them with the provider's reader.

    python3 scripts/ray_descriptors.py 2.9.3 2.35.0 2.36.0 2.40.0 ...

Needs pip (wheels come from the package index) and the protobuf package
(to read a FileDescriptorProto). Run by hand when a Ray release is added;
its output is committed, so the test needs neither.
"""
import ast, glob, json, os, re, subprocess, sys, tempfile, zipfile

from google.protobuf import descriptor_pb2

# message -> fields the reader decodes; enums -> (message, enum name)
WANT = {
    "GcsNodeInfo": ["node_id", "node_manager_address", "state", "node_manager_hostname", "resources_total",
                    "start_time_ms", "is_head_node", "labels"],
    "PlacementGroupTableData": ["placement_group_id", "bundles", "state", "creator_job_id"],
    "Bundle": ["unit_resources", "node_id"],
    "JobTableData": ["job_id", "driver_pid", "entrypoint", "driver_address"],
    "Address": ["ip_address"],
    "GcsStatus": ["code", "message"],
    "GetAllNodeInfoReply": ["status", "node_info_list"],
    "GetAllPlacementGroupReply": ["status", "placement_group_table_data"],
    "GetAllJobInfoReply": ["status", "job_info_list"],
    "InternalKVGetReply": ["status", "value"],
}
ENUMS = {"GcsNodeInfo": "GcsNodeState", "PlacementGroupTableData": "PlacementGroupState"}
FILES = ["gcs_pb2.py", "gcs_service_pb2.py", "common_pb2.py"]


def serialized(src):
    m = re.search(r"AddSerializedFile\((b'.*?')\)", src, re.S) or re.search(r"serialized_pb=(b'.*?')\s*[,)]", src, re.S)
    if not m:
        raise SystemExit("no serialized descriptor found")
    return ast.literal_eval(m.group(1))


def walk(messages, prefix=""):
    for m in messages:
        yield m
        yield from walk(m.nested_type)


def release(version, workdir):
    subprocess.run([sys.executable, "-m", "pip", "download", "ray==" + version, "--no-deps", "-q", "-d", workdir,
                    "--only-binary=:all:", "--platform", "manylinux2014_x86_64", "--python-version", "3.11"], check=True)
    wheel = glob.glob(os.path.join(workdir, "ray-%s-*.whl" % version))[0]
    out = {"ray_version": version, "messages": {}, "enums": {}}
    with zipfile.ZipFile(wheel) as z:
        for name in FILES:
            fd = descriptor_pb2.FileDescriptorProto.FromString(serialized(z.read("ray/core/generated/" + name).decode()))
            for m in walk(fd.message_type):
                if m.name in WANT and m.name not in out["messages"]:
                    out["messages"][m.name] = {f.name: {"number": f.number, "type": descriptor_pb2.FieldDescriptorProto.Type.Name(f.type)}
                                               for f in m.field if f.name in WANT[m.name]}
                if m.name in ENUMS:
                    for e in m.enum_type:
                        if e.name == ENUMS[m.name]:
                            out["enums"][m.name + "." + e.name] = {v.name: v.number for v in e.value}
    os.remove(wheel)
    return out


def main():
    dest = os.path.join(os.path.dirname(__file__), "..", "internal", "raygcs", "testdata", "descriptors")
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        for v in sys.argv[1:]:
            d = release(v, work)
            with open(os.path.join(dest, "ray-%s.json" % v), "w") as f:
                json.dump(d, f, indent=1, sort_keys=True)
                f.write("\n")
            print(v, len(d["messages"]), "messages", file=sys.stderr)


if __name__ == "__main__":
    main()
