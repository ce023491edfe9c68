// The fields of the code host's webhook payloads that the control plane reads (GitHub's shapes, as
// in the octokit payload examples): each bounded, so a signed but malformed delivery is refused
// with a 400 before anything is recorded. Other fields pass untouched.
import { type Static, Type } from '@sinclair/typebox';

/** A positive id that JavaScript holds exactly and both databases store (BIGINT on Postgres). */
export const CodehostId = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });

/** GitHub logins are at most 39 characters; room is left for other code hosts. */
const Login = Type.String({ minLength: 1, maxLength: 100 });
/** Git refs and branch names: GitHub refuses names past 255 bytes. */
const Ref = Type.String({ minLength: 1, maxLength: 255 });
/** A commit id: SHA-1 (40) or SHA-256 (64) lowercase hex; a deleted ref's is all zeros. */
const Sha = Type.String({ pattern: '^[0-9a-f]{40}([0-9a-f]{24})?$' });

export const InstallationEvent = Type.Object({
  action: Type.String({ minLength: 1, maxLength: 64 }),
  installation: Type.Object({
    id: CodehostId,
    account: Type.Optional(Type.Object({ login: Login })),
  }),
});
export type InstallationEvent = Static<typeof InstallationEvent>;

export const PushEvent = Type.Object({
  ref: Ref,
  after: Sha,
  deleted: Type.Optional(Type.Boolean()),
  repository: Type.Object({
    // owner (≤ 39) / name (≤ 100)
    full_name: Type.String({ minLength: 3, maxLength: 140 }),
    default_branch: Type.Optional(Ref),
  }),
  installation: Type.Optional(Type.Object({ id: CodehostId })),
});
export type PushEvent = Static<typeof PushEvent>;
