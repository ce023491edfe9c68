// Hosted sandbox providers and the VM cloud, by provider name: the drivers the dispatcher runs
// driver-host commands with, and the provisioner the deploy kind's provision phase uses.
import type { SecretBox } from '../clouds/secret-box.ts';
import type { Db } from '../db/types.ts';
import type { Provisioner } from '../deployments/deps.ts';
import type { Driver } from '../hosts/dispatcher.ts';
import { cloudVm } from './cloudvm.ts';
import { DriverHost, type SandboxProvider } from './driver-host.ts';
import { sandboxA } from './sandbox-a.ts';
import { sandboxB } from './sandbox-b.ts';

/** The hosted sandbox providers by name, made fresh: a driver keeps its own state. */
export function sandboxProviders(): Map<string, SandboxProvider> {
  return new Map([
    ['sandbox-a', sandboxA()],
    ['sandbox-b', sandboxB],
  ]);
}

export function createDrivers(db: Db, box: SecretBox): Map<string, Driver> {
  return new Map([...sandboxProviders()].map(([name, p]) => [name, new DriverHost(db, box, p)]));
}

export function createProvisioners(box: SecretBox): Map<string, Provisioner> {
  return new Map([['cloudvm', cloudVm(box)]]);
}
