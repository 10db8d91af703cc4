"""The development chain's pool and miner, in process."""

from __future__ import annotations

import asyncio

from eth_account import Account

from edgeplane.chain.dev_accounts import dev_accounts
from edgeplane.chain.dev_chain import ChainConfig, DevChain
from edgeplane.chain.server import ChainNode, MiningConfig


def transfer(key: str, nonce: int, *, gas: int = 21000) -> bytes:
    fields = {"to": "0x" + "44" * 20, "value": 1, "gas": gas, "maxFeePerGas": 10**11, "maxPriorityFeePerGas": 1}
    return bytes(Account.sign_transaction({**fields, "nonce": nonce, "chainId": 1337}, key).raw_transaction)


def test_the_gas_limit_stays_as_configured() -> None:
    chain = DevChain(ChainConfig())
    for _ in range(1100):
        chain.mine()
    assert chain.head().gas_limit == 30_000_000
    chain.close()


def test_a_queue_larger_than_a_block_is_mined_over_several_blocks() -> None:
    chain = DevChain(ChainConfig(gas_limit=100_000))
    node = ChainNode("default", chain, MiningConfig())
    key = dev_accounts()[0].private_key

    async def send_all() -> list[str]:
        return await asyncio.gather(*(node.send(transfer(key, nonce)) for nonce in range(10)))

    hashes = asyncio.run(send_all())
    assert len(set(hashes)) == 10
    assert chain.head().block_number >= 3  # 4 transfers of 21,000 gas fit in a block of 100,000
    for tx_hash in hashes:
        assert chain.transaction_location(bytes.fromhex(tx_hash[2:])) is not None
    chain.close()
