# Shared by kvm-patch/build.sh, tcg/run.sh and dkms/mkdkms.sh (sourced).
# The pinned source, the cache and the series file are defined here only.

# Debian's linux-source-6.12 as the series is written against.
KVER=6.12.117
TARBALL=/usr/src/linux-source-6.12.tar.xz
# Sources, objects, ccache and logs: never in the checkout.
CACHE=${NAP_CACHE:-/var/cache/nova-adaptive-paging}
PATCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/patches

# The patch file names of the series, in order, one per line.
series_patches() {
	grep -v -e '^#' -e '^[[:space:]]*$' "$PATCH_DIR/series" || true
}
