package nodefacts

// filesScript reads what Script's Python would say (Python's version, the
// ray and vllm distributions' versions, what vLLM's source says of its Ray
// executors, the TCP probe) from the files and a shell, without starting
// Python: a plan reads every node, and a Python start costs tens of
// milliseconds of CPU on each. It sets read_from_files=1, with pyver,
// rayver, vllmver, vllmexec and tcp, only when the files say what Python
// would for sure; otherwise it sets nothing and Script asks Python.
//
// For sure means: $py is a virtual environment's interpreter (the
// pyvenv.cfg beside its bin/, not in it, with
// include-system-site-packages = false) run without PYTHONPATH or
// PYTHONHOME, so sys.path is the standard library and that environment's
// site-packages (Python's site.py, 3.8-3.13: the user site is off in such
// an environment); nothing in the current directory, which `python -c`
// puts first on sys.path, is named like ray or vllm; no .pth file there
// adds a path (an import line adds none: PEP 660's editable finders,
// setuptools' distutils-precedence.pth); ray is one ray-*.dist-info, as
// importlib.metadata.version("ray") finds it; vllm is one
// vllm-*.dist-info with its package beside it (an editable vLLM keeps its
// source elsewhere: Python is asked), or nothing named vllm at all.
//
// Python's version comes from `python -V`, which prints it before the
// interpreter initialises (no site, no imports: a millisecond), not from
// pyvenv.cfg, which keeps the version the environment was made with.
// The executor default is the same text search Script's Python makes in
// vllm/envs.py (vllm/foundation/system/envs.py where vLLM's main branch
// moved it after 0.34.0; no release has that layout yet): the first "VLLM_USE_RAY_V2_EXECUTOR_BACKEND": and, in the
// 400 characters from it, getenv("VLLM_USE_RAY_V2_EXECUTOR_BACKEND",
// "0"|"1") (vllm/envs.py, vLLM 0.32.0; releases without the variable
// have RayExecutorV2 only, or the legacy executor only:
// ../shared/research/real-vllm-on-cpu.md). The TCP probe is bash's
// /dev/tcp under timeout 3, as Python's create_connection(timeout=3):
// "open", "timeout", or "closed <strerror>".
const filesScript = `read_from_files=
case "${7:-}:$py" in
python:*) ;;
*:/*/bin/*)
  pre=${py%/bin/*} ok=1
  [ -z "${PYTHONPATH:-}" ] && [ -z "${PYTHONHOME:-}" ] || ok=
  [ -e "${py%/*}/pyvenv.cfg" ] && ok=
  grep -qE '^include-system-site-packages *= *false *$' "$pre/pyvenv.cfg" 2>/dev/null || ok=
  for x in ./ray* ./Ray* ./vllm* ./vLLM* ./VLLM*; do [ -e "$x" ] && ok=; done
  f_py= f_ray= f_vllm= f_exec= f_tcp=
  if [ -n "$ok" ]; then
    f_py=$("$py" -V 2>&1)
    case "$f_py" in
    "Python "[0-9]*) f_py=${f_py#Python }; case "$f_py" in *[!0-9a-z.+]*) f_py= ;; esac ;;
    *) f_py= ;;
    esac
    sp="$pre/lib/python${f_py%.*}/site-packages"
    [ -n "$f_py" ] && [ -d "$sp" ] || ok=
  fi
  if [ -n "$ok" ] && grep -qvhE '^(import[[:space:]]|#|[[:space:]]*$)' "$sp"/*.pth 2>/dev/null; then ok=; fi
  one_version() {
    set -- "$sp/$1"-*.dist-info
    [ $# -eq 1 ] && [ -f "$1/METADATA" ] && sed -n '/^$/q;/^Version: */{s///p;q;}' "$1/METADATA"
  }
  if [ -n "$ok" ]; then f_ray=$(one_version ray); [ -n "$f_ray" ] || ok=; fi
  if [ -n "$ok" ]; then
    envs=$sp/vllm/envs.py
    [ -f "$envs" ] || envs=$sp/vllm/foundation/system/envs.py
    if [ -f "$envs" ] && f_vllm=$(one_version vllm) && [ -n "$f_vllm" ]; then
      if grep -q '"VLLM_USE_RAY_V2_EXECUTOR_BACKEND":' "$envs"; then
        f_exec=$(tr '\n\t\r' '   ' < "$envs" | grep -o '"VLLM_USE_RAY_V2_EXECUTOR_BACKEND":.*' | cut -c1-400 |
          grep -o 'getenv( *"VLLM_USE_RAY_V2_EXECUTOR_BACKEND" *, *"[01]" *)' | head -n 1 | sed 's/.*"\([01]\)".*/flag=\1/')
      elif [ -e "$sp/vllm/v1/executor/ray_executor_v2.py" ]; then f_exec=v2-only
      else f_exec=legacy-only
      fi
    else
      for x in "$sp"/vllm* "$sp"/vLLM* "$sp"/VLLM*; do [ -e "$x" ] && ok=; done
    fi
  fi
  if [ -n "$ok" ] && [ -n "${5:-}" ]; then
    if command -v bash >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then
      err=$(timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "${5%:*}" "${5##*:}" 2>&1)
      case $? in
      0) f_tcp=open ;;
      124) f_tcp=timeout ;;
      *) f_tcp="closed ${err##*: }" ;;
      esac
    else
      ok=
    fi
  fi
  if [ -n "$ok" ]; then
    pyver=$f_py rayver=$f_ray vllmver=$f_vllm vllmexec=$f_exec tcp=$f_tcp read_from_files=1
  fi
  ;;
esac`
