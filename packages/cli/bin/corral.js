#!/bin/sh
':' //; case $1 in run) [ -r /proc/self/status ] && while read -r k v; do [ "$k" = SigIgn: ] && CORRAL_SIGIGN="$$:$v" && export CORRAL_SIGIGN; done < /proc/self/status;; esac; exec node "$0" "$@"
// Run by sh first (line 2), then by node. Node resets every ignored signal
// before any JavaScript runs, so for `corral run` the shell reads which
// ones corral's caller ignored, for CMD to inherit them as timeout(1) lets it.
import "../bundle/main.js"
