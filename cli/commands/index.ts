// Every command, in the order help and completion list them (the spec's table order).
import type { Command } from '../command.ts';
import { login, whoami } from './account.ts';
import {
  deploymentGet,
  deploymentWatch,
  envDeployments,
  envDestroy,
  envGet,
  envVersions,
  events,
} from './envs.ts';
import { exec, filesGet, filesPut } from './files.ts';
import { fsCat, fsLs, fsPut, fsRm } from './fs.ts';
import { cloudConnect, cloudList, hostJoinToken, hostList } from './infra.ts';
import { deploy, fork, rollback, snapshot, verify } from './lifecycle.ts';
import { completion, help, unavailable, version } from './meta.ts';
import { kill, ps, shell } from './processes.ts';
import { projectCreate, projectEnvs, projectList } from './projects.ts';
import { step } from './step.ts';
import { init, templates } from './templates.ts';

export const COMMANDS: readonly Command[] = [
  login,
  whoami,
  templates,
  init,
  projectCreate,
  projectList,
  projectEnvs,
  cloudConnect,
  cloudList,
  hostList,
  hostJoinToken,
  deploy,
  envGet,
  envVersions,
  envDeployments,
  envDestroy,
  fork,
  snapshot,
  rollback,
  verify,
  step,
  filesPut,
  filesGet,
  exec,
  shell,
  ps,
  kill,
  fsLs,
  fsCat,
  fsPut,
  fsRm,
  deploymentGet,
  deploymentWatch,
  events,
  help,
  completion,
  version,
  ...unavailable,
];
