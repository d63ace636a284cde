import { BaseError, ContractFunctionRevertedError, type Address, type PublicClient } from 'viem'
import { usdcAbi } from './contracts.js'

/**
 * Questions to the token, eth_calls from the settler's address (nothing is sent). Of a payer whose transfers failed
 * (the settler says not why) they tell its funds apart from what no funding mends: a payee the token will not credit
 * (the zero address; on Circle's USDC a blocklisted one, or all while paused), or a payer whose tokens it won't move.
 */
export class TokenProbe {
  constructor(
    private readonly client: PublicClient,
    private readonly usdc: Address,
    private readonly settler: Address,
  ) {}

  /**
   * Whether the token refuses to credit `payee`, whatever the amount (a transfer of nothing from the settler fails).
   */
  refusesPayee(payee: Address): Promise<boolean> {
    return this.refuses('transfer', [payee, 0n])
  }

  /** Whether the token refuses to move `payer`'s tokens to `payee` through the settler, whatever the amount. */
  refusesLeg(payer: Address, payee: Address): Promise<boolean> {
    return this.refuses('transferFrom', [payer, payee, 0n])
  }

  /** Whether the payer's balance and allowance to the settler cover `amount` now. */
  async covers(payer: Address, amount: bigint): Promise<boolean> {
    const [balance, allowance] = await Promise.all([
      this.client.readContract({ address: this.usdc, abi: usdcAbi, functionName: 'balanceOf', args: [payer] }),
      this.client.readContract({
        address: this.usdc,
        abi: usdcAbi,
        functionName: 'allowance',
        args: [payer, this.settler],
      }),
    ])
    return balance >= amount && allowance >= amount
  }

  private async refuses(
    functionName: 'transfer' | 'transferFrom',
    args: readonly [Address, bigint] | readonly [Address, Address, bigint],
  ): Promise<boolean> {
    try {
      const { result } = await this.client.simulateContract({
        address: this.usdc,
        abi: usdcAbi,
        functionName,
        args: args as never,
        account: this.settler,
      })
      // A token may answer false instead of reverting; the settler counts that as a refusal too.
      return result === false
    } catch (err) {
      // Only a revert answers the question: a node that cannot be reached fails the pass, which is tried again.
      if (err instanceof BaseError && err.walk((e) => e instanceof ContractFunctionRevertedError)) return true
      throw err
    }
  }
}
