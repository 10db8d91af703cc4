"""The development chain's prefunded accounts, derived from a published mnemonic.

The mnemonic is the one every Ethereum development node uses ("test test ... junk"), so the accounts and keys are
the familiar ones and are printed by ``edgeplane chain accounts``. They are public: never use them on a real network.
The chain's own chain id keeps transactions signed for it from being replayed elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from eth_account import Account

DEV_MNEMONIC = "test test test test test test test test test test test junk"
DEV_ACCOUNT_COUNT = 10
DEV_ACCOUNT_BALANCE_WEI = 10_000 * 10**18


@dataclass(frozen=True, slots=True)
class DevAccount:
    """One prefunded account."""

    address: str  # checksummed
    private_key: str  # 0x-hex
    derivation_path: str


@cache
def dev_accounts(count: int = DEV_ACCOUNT_COUNT) -> tuple[DevAccount, ...]:
    """The first ``count`` accounts of the mnemonic, on the standard path ``m/44'/60'/0'/0/i``."""
    Account.enable_unaudited_hdwallet_features()
    accounts = []
    for index in range(count):
        path = f"m/44'/60'/0'/0/{index}"
        account = Account.from_mnemonic(DEV_MNEMONIC, account_path=path)
        accounts.append(DevAccount(address=account.address, private_key=account.key.to_0x_hex(), derivation_path=path))
    return tuple(accounts)
