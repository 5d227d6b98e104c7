#!/usr/bin/env bash
# The logic behind examples/github/gauntlet-gate.yml, kept out of the YAML so that it stays thin and so that every
# step can be replayed on a workstation (crates/gauntlet/tests/it/real_server.rs does, against the embedded default).
#
#   gauntlet-ci.sh plan    -> `matrix=…` and `count=N` for $GITHUB_OUTPUT: which profiles this event concerns
#   gauntlet-ci.sh gate    -> one profile's gate ($PROFILE); promotes and publishes the baseline when trusted
#   gauntlet-ci.sh merge   -> folds the shards under $SHARDS into one verdict against the plan's $MATRIX
#
# Inputs are environment variables; the workflow maps its ${{ }} expressions into them:
#   EVENT          github.event_name (pull_request, push, workflow_dispatch)
#   PROFILES       dispatch input: comma-separated profiles, empty for all
#   REFRESH        dispatch input: `true` promotes the runs as the new baselines
#   BASE_SHA       pull request: the base commit the change is measured against
#   GAUNTLET       the gauntlet binary (default: `gauntlet` on PATH)
#   GAUNTLET_MANIFEST  the manifest (default: gauntlet's embedded default)
#   BASELINES_BRANCH   the branch that holds the baseline store (default: gauntlet-baselines)
#   STORE_DIR      where that branch is checked out (default: .gauntlet-store)
#
# Where the store lives: a branch of the same repository, checked out as a git worktree (so the checkout's
# credentials apply) and pushed only from trusted runs; pull requests read it and never write it. gauntlet itself
# refuses `--promote` outside a push or dispatch on the default branch, whatever this script does.
set -euo pipefail

G=${GAUNTLET:-gauntlet}
BRANCH=${BASELINES_BRANCH:-gauntlet-baselines}
STORE_DIR=${STORE_DIR:-.gauntlet-store}
manifest=()
if [ -n "${GAUNTLET_MANIFEST:-}" ]; then manifest=(--manifest "$GAUNTLET_MANIFEST"); fi
say() { printf 'gauntlet-ci: %s\n' "$*" >&2; }

# The baselines branch at $STORE_DIR: fetched when it exists, else a new empty (orphan) history.
checkout_store() {
  if [ -e "$STORE_DIR/.git" ]; then return; fi
  if git fetch -q --depth=1 origin "$BRANCH" 2>/dev/null; then
    git worktree add -q --detach "$STORE_DIR" FETCH_HEAD
  else
    say "no branch $BRANCH yet: starting an empty store"
    git worktree add -q --detach "$STORE_DIR" HEAD
    git -C "$STORE_DIR" checkout -q --orphan "gauntlet-store-$$"
    git -C "$STORE_DIR" rm -rqf --ignore-unmatch .
    git -C "$STORE_DIR" clean -qfdx
  fi
  printf '.lock\n' >"$STORE_DIR/.gitignore"
}

# The commit the newest published baselines were measured on (a `Source-Commit:` trailer), if any.
baseline_commit() {
  git fetch -q --depth=1 origin "$BRANCH" 2>/dev/null || return 0
  git log -1 --format='%(trailers:key=Source-Commit,valueonly)' FETCH_HEAD | head -1 | tr -d '[:space:]'
}

plan() {
  local sel=()
  case "${EVENT:?EVENT is required}" in
    workflow_dispatch)
      if [ -n "${PROFILES:-}" ]; then sel=(--profiles "$PROFILES"); else sel=(--all); fi ;;
    pull_request)
      sel=(--since "${BASE_SHA:?BASE_SHA is required for a pull request}") ;;
    push)
      local since
      since=$(baseline_commit)
      if [ -n "$since" ] && git cat-file -e "$since^{commit}" 2>/dev/null; then
        sel=(--since "$since")
      else
        say "no published baseline commit in this history: every profile"
        sel=(--all)
      fi ;;
    *) say "unsupported event $EVENT"; return 2 ;;
  esac
  "$G" plan "${manifest[@]}" "${sel[@]}" --format github-output
}

# Commits the store and pushes it, rebasing onto concurrent publishes (records are content-addressed and each
# identity has its own history file, so two profiles never touch the same file).
publish_store() {
  git -C "$STORE_DIR" add -A
  if git -C "$STORE_DIR" diff --cached --quiet; then say "store unchanged"; return 0; fi
  git -C "$STORE_DIR" -c user.name="${GIT_AUTHOR_NAME:-gauntlet}" -c user.email="${GIT_AUTHOR_EMAIL:-gauntlet@invalid}" \
    commit -q -m "gauntlet: baselines of $PROFILE" -m "Source-Commit: $(git rev-parse HEAD)"
  for attempt in 1 2 3 4 5; do
    if git -C "$STORE_DIR" push -q origin "HEAD:refs/heads/$BRANCH"; then say "published to $BRANCH"; return 0; fi
    say "push rejected (attempt $attempt): rebasing onto the newer $BRANCH"
    git -C "$STORE_DIR" fetch -q origin "$BRANCH" && git -C "$STORE_DIR" rebase -q FETCH_HEAD || return 1
  done
  return 1
}

gate() {
  : "${PROFILE:?PROFILE is required}"
  checkout_store
  local out=gauntlet-out/$PROFILE promote=()
  if [ "${EVENT:?}" = push ] || { [ "$EVENT" = workflow_dispatch ] && [ "${REFRESH:-false}" = true ]; }; then
    promote=(--promote --note "${EVENT} ${GITHUB_SHA:-$(git rev-parse HEAD)}")
  fi
  local code=0
  "$G" run "${manifest[@]}" --profile "$PROFILE" --store "$STORE_DIR/store" --out "$out" --source . "${promote[@]}" \
    || code=$?
  if [ $code = 3 ]; then
    # Skipped (GPU busy): not a failure of the change. skipped.json says why; the merge reports it.
    echo "::notice title=gauntlet ${PROFILE} skipped::$(sed -n 's/.*"reason": "\(.*\)".*/\1/p' "$out/skipped.json")"
    return 0
  fi
  if [ ${#promote[@]} -gt 0 ] && [ $code = 0 ]; then publish_store; fi
  return $code
}

merge() {
  local matrix_file
  matrix_file=$(mktemp)
  printf '%s' "${MATRIX:?MATRIX is required: the matrix output of the plan job}" >"$matrix_file"
  "$G" report --merge "${SHARDS:-shards}" --matrix "$matrix_file" --out "${MERGED:-merged}" --artifact 'gauntlet-{profile}'
}

case "${1:-}" in
  plan) plan ;;
  gate) gate ;;
  merge) merge ;;
  *) echo "usage: gauntlet-ci.sh plan|gate|merge" >&2; exit 2 ;;
esac
