# Sourced by scripts/bootstrap.sh and scripts/build_scalasca.sh: apt_need WHO PKG... installs the Debian
# packages among PKG that are not installed yet (as root, or with sudo), saying which under the name WHO.
apt_need() {
  local who=$1 pkg sudo=""
  shift
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "$who: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
