// POST /v1/targets/connect (spec "Clouds, hosts and targets"): for a hosted sandbox provider, check
// the token with one read call, then record the cloud and its driver host in one step. A provider
// that refuses the token (401/403) is a 400 naming the provider; one that cannot be reached is a
// 502; in both cases nothing is recorded.
import { connectCloud } from '../clouds/clouds.ts';
import { apiUrlOf, isSandboxProvider, type Provider, validateConfig } from '../clouds/providers.ts';
import type { AppContext } from '../context.ts';
import { BadRequest, Upstream } from '../errors.ts';
import { ensureDriverHost, hostView } from '../hosts/targets.ts';
import { ProviderError } from './http.ts';
import { sandboxProviders } from './index.ts';

export interface ConnectRequest {
  provider: Provider;
  token?: string;
  name?: string;
  config?: Record<string, unknown>;
}

export async function connectTarget(ctx: AppContext, teamId: string, req: ConnectRequest) {
  // Only `check` is called: it keeps no state, so a fresh provider does.
  const driver = sandboxProviders().get(req.provider);
  if (!isSandboxProvider(req.provider) || !driver) {
    throw new BadRequest(
      `${req.provider}: targets/connect takes a hosted sandbox provider (sandbox-a or sandbox-b); connect ${req.provider} with POST /v1/clouds`,
    );
  }
  if (req.token !== undefined && req.config?.token !== undefined && req.config.token !== req.token) {
    throw new BadRequest('give the token once: either token or config.token');
  }
  ctx.secrets.ready();
  const config = validateConfig(req.provider, { ...req.config, ...(req.token ? { token: req.token } : {}) });
  let info: Record<string, unknown>;
  try {
    info = await driver.check({
      id: '',
      provider: req.provider,
      config,
      api: apiUrlOf(req.provider, config),
    });
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    if (err.status === 401 || err.status === 403)
      throw new BadRequest(`${req.provider}: the provider refused the token (${err.message})`);
    throw new Upstream(err.message);
  }
  const cloud = await connectCloud(ctx.db, ctx.secrets, teamId, {
    provider: req.provider,
    name: req.name,
    config,
  });
  const host = await ensureDriverHost(ctx.db, { ID: cloud.ID, TeamID: teamId, Provider: cloud.Provider });
  return { cloud, host: hostView(host, ctx.hub), info, capabilities: host.Capabilities };
}
