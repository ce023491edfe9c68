// Warm pool routes: POST/GET/DELETE /v1/versions/{ver}/pool. The pool service is the
// context's; it is started here and stopped with the app.
import { Type } from '@sinclair/typebox';
import { PoolSizeBody } from '../../protocol/api/bodies.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';

const Params = Type.Object({ ver: Type.String({ minLength: 1, maxLength: 64 }) });

export function poolRoutes(app: App, ctx: AppContext): void {
  const { pool } = ctx;
  pool.onError = (err) => app.log.warn({ err: err.message }, 'warm pool refill failed; retrying');
  app.addHook('onReady', async () => pool.start());
  app.addHook('onClose', async () => pool.stop());
  app.post('/v1/versions/:ver/pool', { schema: { params: Params, body: PoolSizeBody } }, async (req) => ({
    pool: await pool.set(req.caller, req.params.ver, req.body.size),
  }));
  app.get('/v1/versions/:ver/pool', { schema: { params: Params } }, async (req) => ({
    pool: await pool.status(req.caller, req.params.ver),
  }));
  app.delete('/v1/versions/:ver/pool', { schema: { params: Params } }, async (req) => ({
    pool: await pool.remove(req.caller, req.params.ver),
  }));
}
