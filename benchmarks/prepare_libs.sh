#!/usr/bin/env bash
# Builds .libs/ (git-ignored) for device_run.sh's `libs` stage: real Triton libraries'
# sources and tests, pure Python, to carry to the GPU machine (it has no network).
#
#   bash benchmarks/prepare_libs.sh LIGER_GIT_DIR FLA_GIT_DIR
#
# Each argument is a git directory of the library's repository (a clone, or the mirror
# the session's `fetch` tool brings: /work/.mirror/linkedin+Liger-Kernel/repo,
# /work/.mirror/fla-org+flash-linear-attention/repo); `-` skips one. einops (fla's one
# dependency the GPU machine lacks) comes from the package registry. .libs/REVISIONS
# records the commits.
set -euo pipefail
cd "$(dirname "$0")/.."
liger=${1:--} fla=${2:--}
rm -rf .libs && mkdir -p .libs/site
: > .libs/REVISIONS
if [ "$liger" != - ]; then
  mkdir -p .libs/liger
  # path by path: `git archive` of a whole directory stops at a file stored elsewhere (LFS)
  for p in src/liger_kernel test/__init__.py test/conftest.py test/utils.py test/transformers; do
    git --git-dir="$liger" archive HEAD "$p" | tar -x -C .libs/liger
  done
  echo "liger-kernel $(git --git-dir="$liger" rev-parse HEAD)" >> .libs/REVISIONS
fi
if [ "$fla" != - ]; then
  mkdir -p .libs/fla
  git --git-dir="$fla" archive HEAD fla tests | tar -x -C .libs/fla
  echo "flash-linear-attention $(git --git-dir="$fla" rev-parse HEAD)" >> .libs/REVISIONS
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps einops -d "$tmp"
  python3 -m zipfile -e "$tmp"/einops-*.whl .libs/site
  rm -rf "$tmp"
fi
du -sh .libs; cat .libs/REVISIONS
