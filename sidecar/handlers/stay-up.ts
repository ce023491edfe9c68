// The stay-up window of a fresh create, watched beside the commands that follow it.
//
// A service without a healthcheck counts as healthy once it has stayed up one probe interval
// (active-health.ts): a command that fails at once is an exit, not a healthy service. env.create
// answers once its containers run and a denied network's egress verdict is in, with that window
// possibly still open (and an allowed network's probe, which only reports, still running); what
// is pending is kept here per environment. Every deploy follows its env.create with
// env.snapshot, which does its own work meanwhile and waits for the verdict before it freezes the
// stack or publishes a capture (snapshot.ts); any other command of the environment waits for it
// before it runs. So a deploy still succeeds only when the window passed, and no command but the
// snapshot's own preparations reaches the sandbox inside it. A window that failed fails every
// later command of the environment until the stack is replaced (create, rollback) or destroyed.
//
// An svcd restart forgets open windows: the snapshot that comes after the reconnect finds a
// container that exited meanwhile in its own health check, and a reconnect takes far longer than
// the window.
import type { SidecarContext } from '../context.ts';

/** Keeps the open window of `envId`'s create; its rejection is observed where it was made. */
export function holdStayUp(ctx: SidecarContext, envId: string, window: Promise<void>): void {
  ctx.engineState.stayUps.set(envId, window);
}

/** Waits for `envId`'s open window; throws why it failed (and keeps failing until replaced). */
export async function settleStayUp(ctx: SidecarContext, envId: string): Promise<void> {
  const window = ctx.engineState.stayUps.get(envId);
  if (!window) return;
  await window;
  if (ctx.engineState.stayUps.get(envId) === window) ctx.engineState.stayUps.delete(envId);
}

/** The stack is replaced or removed: its window no longer says anything. */
export function dropStayUp(ctx: SidecarContext, envId: string): void {
  ctx.engineState.stayUps.delete(envId);
}
