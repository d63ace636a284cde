import { getAddress, stringToHex } from 'viem'
import { createSiweMessage } from 'viem/siwe'
import { api, type Nonce, type Session } from './api.js'

/**
 * Signing in: an injected EIP-1193 wallet (a browser extension), or on the local rail a test key kept in this browser.
 */

interface Eip1193 {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>
}

declare global {
  interface Window {
    ethereum?: Eip1193
  }
}

/** What signs the sign-in message. */
export interface Signer {
  address: `0x${string}`
  label: string
  sign(message: string): Promise<string>
}

export const injectedWallet = (): Eip1193 | undefined => window.ethereum

export async function injectedSigner(): Promise<Signer> {
  const eth = injectedWallet()
  if (!eth) throw new Error('No browser wallet found. Install one (an EIP-1193 extension) or use a local test wallet.')
  const accounts = (await eth.request({ method: 'eth_requestAccounts' })) as string[]
  if (!accounts[0]) throw new Error('The wallet shared no account.')
  const address = getAddress(accounts[0])
  return {
    address,
    label: 'browser wallet',
    sign: async (message) =>
      (await eth.request({ method: 'personal_sign', params: [stringToHex(message), address] })) as string,
  }
}

const TEST_KEY = 'svc.portal.testWallet'

export const hasTestWallet = () => localStorage.getItem(TEST_KEY) !== null

/** A key generated here and kept in localStorage: for the local rail's test money only, never for real funds. */
export async function testSigner(): Promise<Signer> {
  // Loaded on demand: the key tools are the largest part of the bundle and most visitors never need them.
  const { generatePrivateKey, privateKeyToAccount } = await import('viem/accounts')
  let key = localStorage.getItem(TEST_KEY) as `0x${string}` | null
  if (!key) {
    key = generatePrivateKey()
    localStorage.setItem(TEST_KEY, key)
  }
  const account = privateKeyToAccount(key)
  return { address: account.address, label: 'local test wallet', sign: (message) => account.signMessage({ message }) }
}

export function forgetTestWallet(): void {
  localStorage.removeItem(TEST_KEY)
}

/**
 * EIP-4361: ask for a nonce, have the wallet sign a message naming this site, the chain and the nonce, exchange it for
 * a session.
 */
export async function signIn(signer: Signer): Promise<Session> {
  const n = await api<Nonce>('POST', '/nonce', {})
  const message = createSiweMessage({
    domain: n.domain,
    address: signer.address,
    statement: n.statement,
    uri: n.uri,
    version: '1',
    chainId: n.chain_id,
    nonce: n.nonce,
    issuedAt: new Date(),
    expirationTime: new Date(n.expires_at * 1000),
  })
  const signature = await signer.sign(message)
  return api<Session>('POST', '/session', { message, signature })
}
