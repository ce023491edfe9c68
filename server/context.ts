// What every route module receives: the parsed config, the database and the long-lived domain
// services. Built once in main.ts; tests build it the same way against their own database.
import type { Config } from './config/config.ts';
import type { Db } from './db/types.ts';
import type { Authenticator } from './identity/auth.ts';

export interface AppContext {
  config: Config;
  db: Db;
  auth: Authenticator;
}
