"""Finding and loading the libnbc.so built against the MPI that mpi4py runs on.

One process cannot hold two MPI libraries: a libnbc.so linked against MPICH, loaded next to
an mpi4py running on Open MPI, would call into a second, uninitialized MPI. So the library is
chosen by the MPI mpi4py reports, and its dynamic dependencies are read before it is loaded.
"""
import ctypes
import ctypes.util
import os
import struct

from mpi4py import MPI

# What each MPI's build of nbc is called in the source tree (the Makefile's BUILD_$(MPI)), how
# its launcher is named, and the library it links.
FLAVORS = {
    "openmpi": {"build": os.path.join("build", "openmpi"), "launcher": "mpiexec.openmpi",
                "make": "make MPI=openmpi", "name": "Open MPI", "soname": "libmpi.so"},
    "mpich": {"build": "build", "launcher": "mpiexec.mpich", "make": "make",
              "name": "MPICH", "soname": "libmpich.so"},
}


class LibraryError(ImportError):
    """No libnbc.so that matches mpi4py's MPI could be loaded; the message says what to do."""


def mpi_flavor():
    """'openmpi' or 'mpich' from MPI.Get_library_version(), or None for another MPI."""
    version = MPI.Get_library_version()
    if version.startswith("Open MPI"):
        return "openmpi"
    if "MPICH" in version or "Intel(R) MPI" in version or "MVAPICH" in version:
        return "mpich"
    return None


def needed_libraries(path):
    """The DT_NEEDED entries of an ELF64 little-endian shared library (empty if unreadable)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return []
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for sh in sections:
        if sh[1] != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[sh[6]]  # sh_link: its string table
        for off in range(sh[4], sh[4] + sh[5], 16):
            tag, val = struct.unpack_from("<qQ", data, off)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                start = strtab[4] + val
                names.append(data[start:data.index(b"\0", start)].decode())
    return names


def library_flavor(path):
    """Which MPI a libnbc.so links: 'openmpi', 'mpich' or None."""
    for name in needed_libraries(path):
        if name.startswith("libmpich"):
            return "mpich"
        if name.startswith("libmpi.so"):
            return "openmpi"
    return None


def _source_root():
    """The repository this package sits in (python/nbc/ inside it), or None when installed."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return root if os.path.isfile(os.path.join(root, "runtime", "nbc.h")) else None


def _candidates(flavor):
    """(path, where) pairs to try, in order."""
    env = os.environ.get("NBC_LIBRARY")
    if env:
        return [(env, "NBC_LIBRARY")]
    found = []
    root = _source_root()
    if root is not None:
        for f in ([flavor] if flavor else []) + [x for x in FLAVORS if x != flavor]:
            found.append((os.path.join(root, FLAVORS[f]["build"], "lib", "libnbc.so"), "the build tree"))
    try:
        from . import _installed  # written by `make install`
        found.append((os.path.join(_installed.LIBDIR, "libnbc.so.0"), "make install"))
    except ImportError:
        pass
    system = ctypes.util.find_library("nbc")
    if system:
        found.append((system, "the system's library path"))
    return found


def _advice(flavor):
    root = _source_root() or "the nbc source tree"
    f = FLAVORS[flavor]
    return ("build nbc against %s (`%s` in %s, or `%s install` to install it) and run under %s, "
            "or set NBC_LIBRARY to a libnbc.so built against %s"
            % (f["name"], f["make"], root, f["make"], f["launcher"], f["name"]))


def load():
    """Loads the matching libnbc.so; returns (ctypes.CDLL, flavor, path)."""
    flavor = mpi_flavor()
    if flavor is None:
        raise LibraryError("nbc: mpi4py runs on an MPI nbc does not know (%s); set NBC_LIBRARY to "
                           "a libnbc.so built against it" % MPI.Get_library_version().splitlines()[0])
    mismatched = []
    for path, where in _candidates(flavor):
        if not os.path.exists(path):
            if where == "NBC_LIBRARY":
                raise LibraryError("nbc: NBC_LIBRARY names %s, which does not exist" % path)
            continue
        built = library_flavor(path)
        if built is not None and built != flavor:
            mismatched.append("%s (from %s) is built against %s" % (path, where, FLAVORS[built]["name"]))
            continue
        return ctypes.CDLL(path), flavor, path
    what = "; ".join(mismatched) if mismatched else "no libnbc.so found"
    raise LibraryError("nbc: mpi4py runs on %s (%s), and one process cannot use two MPI libraries: "
                       "%s. To fix: %s."
                       % (FLAVORS[flavor]["name"], MPI.Get_library_version().splitlines()[0].strip(),
                          what, _advice(flavor)))


def check_launcher(flavor):
    """A rank that finds itself alone while another MPI's launcher started several processes
    was started by the wrong mpiexec: every process would be a world of one, silently."""
    if MPI.COMM_WORLD.Get_size() != 1:
        return
    if flavor == "openmpi" and int(os.environ.get("PMI_SIZE", "1")) > 1:
        other = "MPICH's (PMI_SIZE=%s)" % os.environ["PMI_SIZE"]
    elif flavor == "mpich" and int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
        other = "Open MPI's (OMPI_COMM_WORLD_SIZE=%s)" % os.environ["OMPI_COMM_WORLD_SIZE"]
    else:
        return
    raise LibraryError("nbc: this process was started by %s launcher but mpi4py runs on %s: each "
                       "process is a world of one. Run it with %s."
                       % (other, FLAVORS[flavor]["name"], FLAVORS[flavor]["launcher"]))
