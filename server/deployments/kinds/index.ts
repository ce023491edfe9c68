// Every deployment kind, as data for the engine.
import type { KindDef } from '../engine.ts';
import { deployKind } from './deploy.ts';
import { destroyKind } from './destroy.ts';
import { forkKind } from './fork.ts';
import { promoteKind } from './promote.ts';
import { rollbackKind } from './rollback.ts';
import { snapshotKind } from './snapshot.ts';
import { verifyKind } from './verify.ts';

export const KINDS: readonly KindDef<unknown>[] = [
  deployKind,
  forkKind,
  snapshotKind,
  rollbackKind,
  verifyKind,
  destroyKind,
  promoteKind,
];
