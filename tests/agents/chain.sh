#!/bin/sh
# A chain of processes, each link the parent of the next (hostile_agent.py's `chain` mode): link N
# starts link N+1, then becomes a `sleep`. Up to $CHAIN_LINKS links, each carrying $HOSTILE_CHAIN in
# its environment for the test to find. Only the head is its adopter's child: a sweep that ends
# children a scan of /proc at a time loses to it.
n=${1:-1}
if [ "$n" -lt "${CHAIN_LINKS:-2000}" ]; then
    sh "$0" $((n + 1)) &
fi
exec sleep 600
