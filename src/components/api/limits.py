"""The limits YAML is read within (`load_documents`, and so `gpu-operator validate` and the
operator's reading of users' config files): the API server's and etcd's own (a resource past
them is refused by the cluster, so it is a problem here too) and the bounds on what one
file may cost to read (a file past them is refused before it can take the machine).

The API server's: k8s.io/apiserver/pkg/server/config.go sets `MaxRequestBodyBytes` to
3 MiB ("1.5MB is the recommended client request size ... the etcd server should accept
... so we allow 2x as the largest request body size"); etcd's `--max-request-bytes`
defaults to 1.5 MiB (etcd's "System limits"). A custom resource is stored in etcd as its
JSON, so a single object is bounded by etcd's 1.5 MiB, the tighter of the two: the API
server reads a 2 MiB body, then etcd refuses to store it ("request is too large").
"""

from __future__ import annotations

#: etcd's default `--max-request-bytes`: the most one stored object's JSON can take.
MAX_OBJECT_BYTES = 1536 * 1024
#: Values (scalars, lists, objects, keys) one document may hold or expand to through YAML
#: aliases: every JSON value takes at least two bytes (`0,`), so a document with more
#: cannot fit in `MAX_OBJECT_BYTES`. Bounds the time and memory one document may cost.
MAX_VALUES = MAX_OBJECT_BYTES // 2
#: Values one file may hold in all, over its documents (other kinds included): what one
#: file may cost in memory (about 100 bytes a value) before it is refused.
MAX_FILE_VALUES = 1_000_000
#: Bytes read from one file or standard input: the API server's 3 MiB request body with
#: room for other documents. A larger file is refused without being read into memory.
MAX_FILE_BYTES = 4 * 1024 * 1024
#: Deeper than any field of a ClusterPolicy or NVIDIADriver (about 15 levels); past this a
#: document is refused rather than walked.
MAX_DEPTH = 100
#: The API server decodes a JSON integer as int64 (sigs.k8s.io/json: "JSON integers are
#: unmarshaled ... as an int64 ... falling back to float64"): past this range the value it
#: reads is not the one written, and past float64 the request is refused.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: What a document past `MAX_OBJECT_BYTES` (or `MAX_VALUES`) meets in the cluster.
ETCD_REFUSES = (
    "the 1.5 MiB etcd stores for one object (its --max-request-bytes default), so the API "
    "server cannot save it"
)


def mebibytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"
