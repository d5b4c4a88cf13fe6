#!/usr/bin/env bash
# Packs a relocatable Open MPI runtime from this machine (Debian 12's
# openmpi-bin and libopenmpi3, Open MPI 4.1.4 over PMIx 4) into one archive,
# for a machine that has none: the GPU machine of the device tool, where
# `mpirun -np N caustic render … --device cuda` then runs one rank per GPU.
#
#   scripts/mpi-bundle.sh ARCHIVE.tar.xz [BINARY…]
#
# The archive holds one folder, `openmpi/`, laid out as Debian lays out
# /usr (multiarch: the libraries under lib/x86_64-linux-gnu/, Open MPI's
# components under lib/x86_64-linux-gnu/openmpi/lib/openmpi3/, which is where
# `ompi_info --path all` puts `${prefix}`-relative libdir and pkglibdir):
#
#   bin/            mpirun (orterun), orted, ompi_info
#   lib/x86_64-linux-gnu/                  libmpi, libopen-rte, libopen-pal,
#                   libpmix, hwloc, libevent, libudev, libz, libmunge, … and
#                   whatever the BINARY arguments (`caustic` built with
#                   `--features mpi`) need beyond glibc
#   lib/x86_64-linux-gnu/openmpi/lib/openmpi3/  the MCA components for one
#                   node over shared memory (no UCX, libfabric, PSM or verbs)
#   lib/x86_64-linux-gnu/pmix2/lib/pmix/   PMIx's components
#   share/openmpi/, share/pmix/            help texts (error messages)
#   etc/openmpi/openmpi-mca-params.conf    the component choice (below)
#   env.sh          `source openmpi/env.sh`: OPAL_PREFIX, LD_LIBRARY_PATH,
#                   PATH, PMIx's component path, running as root allowed
#
# Only glibc's own libraries (libc, libm, libpthread, libdl, librt,
# ld-linux) and libgcc_s are left to the target machine. The component
# choice, also in openmpi-mca-params.conf: `pml ob1`, `btl self,vader`
# (shared memory; single copy off: CMA's process_vm_readv is not
# guaranteed under a sandboxed kernel such as gVisor), `plm isolated`
# (mpirun starts the ranks itself: no ssh, one node), `osc sm,rdma`.
set -euo pipefail
archive="${1:?usage: mpi-bundle.sh ARCHIVE.tar.xz [BINARY…]}"
shift
multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
sys="/usr/lib/$multiarch"
ompi_pkglib="$sys/openmpi/lib/openmpi3"
pmix_pkglib="$sys/pmix2/lib/pmix"
for need in /usr/bin/orterun /usr/bin/orted "$ompi_pkglib" "$sys/libmpi.so.40"; do
    [ -e "$need" ] || {
        echo "mpi-bundle: $need is missing: install openmpi-bin and libopenmpi-dev" >&2
        exit 1
    }
done

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/openmpi"
lib="$root/lib/$multiarch"
mkdir -p "$root/bin" "$lib/openmpi/lib/openmpi3" "$lib/pmix2/lib/pmix" \
    "$root/share/openmpi" "$root/share/pmix" "$root/etc/openmpi"

# Components that load libraries of fabrics a single node does not use
# (UCX, libfabric, PSM, verbs, netlink), OpenSHMEM's, MPI-IO's and the
# monitoring ones are left out; ldd decides, by the libraries they need.
unwanted='libuc[mpst]|libfabric|libpsm|libinfinipath|libibverbs|librdmacm|libnl-|libefa|liboshmem|libmca_common_(ucx|ofi|verbs|ompio|monitoring)'
components=()
for so in "$ompi_pkglib"/mca_*.so; do
    name="$(basename "$so" .so)"
    case "$name" in
    # Networks between machines (not oob_tcp: mpirun and its ranks talk over
    # loopback), launchers of other machines, monitoring, fault tolerance.
    *_ofi | *_psm | *_psm2 | *_ucx | *_openib | mca_btl_tcp | *slurm* | *flux* | *jsm* | \
        *gridengine* | mca_plm_rsh | *_monitoring | mca_pml_cm | mca_vprotocol_*) continue ;;
    # MPI-IO (caustic writes its image from rank 0 alone).
    mca_io_* | mca_fs_* | mca_fcoll_* | mca_fbtl_* | mca_sharedfp_*) continue ;;
    esac
    grep -qE "$unwanted" <<<"$(ldd "$so")" && continue
    components+=("$so")
done
cp "${components[@]}" "$lib/openmpi/lib/openmpi3/"
cp "$pmix_pkglib"/pmix_mca_pcompress_zlib.so "$pmix_pkglib"/pmix_mca_prm_default.so "$lib/pmix2/lib/pmix/"

cp /usr/bin/orterun "$root/bin/mpirun"
cp /usr/bin/orted /usr/bin/ompi_info "$root/bin/"

# The libraries all of these need, found by ldd (one level suffices: ldd
# lists a file's whole closure), each copied under its soname.
glibc='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libutil|libresolv|libgcc_s)\.'
for file in "$root"/bin/* "$lib"/openmpi/lib/openmpi3/*.so "$lib"/pmix2/lib/pmix/*.so "$@"; do
    ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 } $2 == "=>" && $3 == "not" { print $1, "missing" }'
done | sort -u | while read -r soname path; do
    [[ "$soname" =~ $glibc ]] && continue
    if [ "$path" = missing ]; then
        echo "mpi-bundle: $soname not found on this machine" >&2
        exit 1
    fi
    [ -e "$lib/$soname" ] || cp -L "$path" "$lib/$soname"
done

# Help texts: Open MPI's error messages are looked up in them.
cp /usr/share/openmpi/help-*.txt "$root/share/openmpi/"
cp "$sys"/pmix2/share/pmix/help-*.txt "$root/share/pmix/" 2>/dev/null || true

cat >"$root/etc/openmpi/openmpi-mca-params.conf" <<'CONF'
# caustic's relocatable Open MPI (scripts/mpi-bundle.sh): one node, shared
# memory. Override any of these with OMPI_MCA_<name> or --mca.
pml = ob1
btl = self,vader
btl_vader_single_copy_mechanism = none
mtl = ^ofi,psm,psm2
osc = sm,rdma
plm = isolated
btl_base_warn_component_unused = 0
mca_base_component_show_load_errors = 1
CONF

cat >"$root/env.sh" <<'ENV'
# Source this (`. openmpi/env.sh`) to use this relocatable Open MPI: the
# installation directories follow OPAL_PREFIX (Open MPI's own relocation
# switch), the libraries LD_LIBRARY_PATH.
_ompi_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
_ompi_lib="$_ompi_root/lib/MULTIARCH"
export OPAL_PREFIX="$_ompi_root"
export OPAL_SYSCONFDIR="$_ompi_root/etc/openmpi"
export OPAL_PKGDATADIR="$_ompi_root/share/openmpi"
# PMIx's directories likewise (its components' path follows PKGLIBDIR; an
# environment MCA parameter does not override it).
export PMIX_PREFIX="$_ompi_lib/pmix2"
export PMIX_PKGLIBDIR="$_ompi_lib/pmix2/lib/pmix"
export PMIX_SYSCONFDIR="$_ompi_root/etc/pmix"
export PMIX_PKGDATADIR="$_ompi_root/share/pmix"
# hwloc's plugins (PCI, OpenCL) are not carried; do not load a system's.
export HWLOC_PLUGINS_PATH="$_ompi_lib/hwloc"
export PATH="$_ompi_root/bin${PATH:+:$PATH}"
export LD_LIBRARY_PATH="$_ompi_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset _ompi_root _ompi_lib
ENV
sed -i "s/MULTIARCH/$multiarch/" "$root/env.sh"

strip --strip-unneeded "$root"/bin/* "$lib"/*.so* "$lib"/openmpi/lib/openmpi3/*.so "$lib"/pmix2/lib/pmix/*.so 2>/dev/null || true
mkdir -p "$(dirname "$archive")"
tar -cJf "$archive" -C "$stage" openmpi
echo "mpi-bundle: $archive: $(du -h "$archive" | cut -f1) ($(find "$root" -type f | wc -l) files, $(du -sh "$root" | cut -f1) unpacked, ${#components[@]} components)"
