#!/usr/bin/env node
import { createRequire } from 'node:module'
import { Command } from 'commander'
import { demoCommand } from './commands/demo.js'
import { serveCommand } from './commands/serve.js'
import { simCommand } from './commands/sim.js'
import { accountCommands } from './commands/accounts.js'
import { keyCommands } from './commands/keys.js'
import { usageCommands } from './commands/usage.js'
import { chainCommands } from './commands/chain.js'
import { certifyCommand } from './commands/certify.js'
import { migrateCommand } from './commands/migrate.js'
import { providerCommands } from './commands/providers.js'
import { receiptCommands } from './commands/receipt.js'
import { auditCommands } from './commands/audit.js'

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string }
const program = new Command()
program
  .name('svc')
  .description('OpenAI-compatible chat completion marketplace, settled in test USDC')
  .version(version)
  .showHelpAfterError('(run svc --help for the commands)')
demoCommand(program)
serveCommand(program)
simCommand(program)
accountCommands(program)
keyCommands(program)
usageCommands(program)
chainCommands(program)
certifyCommand(program)
migrateCommand(program)
providerCommands(program)
receiptCommands(program)
auditCommands(program)
// A usage mistake is one line and a pointer to that command's own help.
const pointToHelp = (cmd: Command, name: string): void => {
  for (const sub of cmd.commands) {
    const full = `${name} ${sub.name()}`
    sub.showHelpAfterError(`(run ${full} --help for its options)`)
    pointToHelp(sub, full)
  }
}
pointToHelp(program, 'svc')

await program.parseAsync()
