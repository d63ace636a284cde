import type { Command } from 'commander'
import { action, common, emit, readConfig, type CommonOptions } from '../context.js'

/**
 * `svc migrate`: creates the store named by the config (or DATABASE_URL), or brings its schema to this svc's, and
 * says which migrations ran. Gateways of this version opening an older store migrate it too; running this first, with
 * older gateways stopped where the upgrade notes say so, makes the upgrade a step of its own.
 */
export function migrateCommand(program: Command): void {
  common(program.command('migrate'))
    .description("create the store, or upgrade its schema to this svc's (says which migrations ran)")
    .action(
      action(async (opts: CommonOptions) => {
        const config = await readConfig(opts)
        const { openStore } = await import('../../store/open.js')
        const { LATEST_MIGRATION } = await import('../../store/migrate.js')
        let ran: string[] = []
        const store = await openStore(config.store, Date.now, { migrated: (names) => (ran = names) })
        await store.close()
        const where = config.store.replace(/\/\/[^@/]*@/, '//…@')
        emit(
          opts,
          { store: where, migrations_run: ran, schema: LATEST_MIGRATION },
          ran.length
            ? [`${where}: ran ${ran.length} migration${ran.length === 1 ? '' : 's'}`, ...ran.map((n) => `  ${n}`)]
            : `${where}: schema current (${LATEST_MIGRATION})`,
        )
      }),
    )
}
