// The idle main process of an image sandbox whose commands all run beside it (the E2B surface's
// image templates): it sleeps until the container is stopped, and ends at once on TERM. Shared so
// the sidecar can recognise it: a loop that runs it never ends on its own, which a start can prove
// sooner than a stay-up window can (sidecar/docker/keeper.ts).
export const KEEPER = ['sh', '-c', "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"] as const;
