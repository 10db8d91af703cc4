// Benign JSON-RPC traffic of the JavaScript libraries wallets and dapps are built on (ethers 6, viem 2), sent to the
// URL given as the first argument by each library's own code: what tests/support/wallet_traffic.py records.
// Usage: node wallet_clients.cjs <url> <private key> <ethers|viem>. Requires ethers and viem (tests/tools).
"use strict";

const [url, privateKey, library] = process.argv.slice(2);

const ERC20 = [
  "function balanceOf(address owner) view returns (uint256)",
  "function allowance(address owner, address spender) view returns (uint256)",
  "function transfer(address to, uint256 value) returns (bool)",
  "function approve(address spender, uint256 value) returns (bool)",
  "function name() view returns (string)",
  "function symbol() view returns (string)",
  "function decimals() view returns (uint8)",
  "event Transfer(address indexed from, address indexed to, uint256 value)",
];
const MULTICALL3 = [
  "function aggregate3((address target, bool allowFailure, bytes callData)[] calls) payable returns ((bool success, bytes returnData)[] returnData)",
];
const ROUTER = [
  "function swapExactTokensForTokens(uint256 amountIn, uint256 amountOutMin, address[] path, address to, uint256 deadline) returns (uint256[] amounts)",
  "function multicall(uint256 deadline, bytes[] data) payable returns (bytes[])",
  "function exactInputSingle((address tokenIn, address tokenOut, uint24 fee, address recipient, uint256 amountIn, uint256 amountOutMinimum, uint160 sqrtPriceLimitX96) params) payable returns (uint256 amountOut)",
];
const USDC = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48";
const WETH = "0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2";
const DAI = "0x6B175474E89094C44Da98b954EedeAC495271d0F";
const MULTICALL = "0xcA11bde05977b3631167028862bE2a173976CA11";
const V2_ROUTER = "0x7a250d5630B4cF539739dF2C5dAcb4c659F2488D";
const V3_ROUTER = "0x68b3465833fb72A70ecDF485E0e4C7bD8665Fc45";
const PERMIT2 = "0x000000000022D473030F116dDEE9F6B43aC78BA3";
const VITALIK = "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045";
const TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

function permit(chainId, owner) {
  return {
    domain: { name: "USD Coin", version: "2", chainId, verifyingContract: USDC },
    types: {
      Permit: [
        { name: "owner", type: "address" },
        { name: "spender", type: "address" },
        { name: "value", type: "uint256" },
        { name: "nonce", type: "uint256" },
        { name: "deadline", type: "uint256" },
      ],
    },
    primaryType: "Permit",
    message: { owner, spender: V2_ROUTER, value: (2n ** 256n - 1n).toString(), nonce: 0, deadline: 1735689600 },
  };
}

function permitBatch(chainId) {
  return {
    domain: { name: "Permit2", chainId, verifyingContract: PERMIT2 },
    types: {
      PermitBatch: [
        { name: "details", type: "PermitDetails[]" },
        { name: "spender", type: "address" },
        { name: "sigDeadline", type: "uint256" },
      ],
      PermitDetails: [
        { name: "token", type: "address" },
        { name: "amount", type: "uint160" },
        { name: "expiration", type: "uint48" },
        { name: "nonce", type: "uint48" },
      ],
    },
    primaryType: "PermitBatch",
    message: {
      details: [
        { token: USDC, amount: (2n ** 160n - 1n).toString(), expiration: 1738368000, nonce: 0 },
        { token: WETH, amount: "1000000000000000000", expiration: 1738368000, nonce: 4 },
      ],
      spender: V3_ROUTER,
      sigDeadline: 1735691400,
    },
  };
}

async function settle(promises) {
  await Promise.allSettled(promises);
}

async function withEthers() {
  const { ethers } = require("ethers");
  const provider = new ethers.JsonRpcProvider(url, undefined, { staticNetwork: false });
  const wallet = new ethers.Wallet(privateKey, provider);
  const network = await provider.getNetwork();
  const chainId = Number(network.chainId);
  const token = new ethers.Contract(USDC, ERC20, provider);
  const multicall = new ethers.Contract(MULTICALL, MULTICALL3, provider);
  const erc20 = new ethers.Interface(ERC20);
  const router = new ethers.Interface(ROUTER);
  const holders = [wallet.address, VITALIK, V2_ROUTER, PERMIT2, MULTICALL, WETH];
  // What a wallet's home screen does at once (ethers gathers concurrent calls into one batch).
  await settle([
    provider.getBlockNumber(),
    provider.getBalance(wallet.address),
    provider.getTransactionCount(wallet.address, "pending"),
    provider.getFeeData(),
    ...holders.map((holder) => token.balanceOf(holder)),
    token.allowance(wallet.address, PERMIT2),
    token.name(),
    token.symbol(),
    token.decimals(),
    provider.getCode(USDC),
    provider.getBlock("latest"),
  ]);
  await settle([multicall.aggregate3.staticCall(holders.map((holder) => [USDC, true, erc20.encodeFunctionData("balanceOf", [holder])]))]);
  await settle([
    provider.call({
      from: wallet.address,
      to: V2_ROUTER,
      data: router.encodeFunctionData("swapExactTokensForTokens", [10n ** 18n, 0n, [WETH, USDC, DAI], wallet.address, 1735689600n]),
    }),
    provider.estimateGas({ from: wallet.address, to: VITALIK, value: 10n ** 15n }),
    provider.call({
      from: wallet.address,
      to: V3_ROUTER,
      value: 10n ** 17n,
      data: router.encodeFunctionData("multicall", [
        1735689600n,
        [router.encodeFunctionData("exactInputSingle", [[WETH, USDC, 500, wallet.address, 10n ** 17n, 0n, 0n]])],
      ]),
    }),
  ]);
  await settle([
    provider.getLogs({ fromBlock: 0, toBlock: "latest", address: USDC, topics: [TRANSFER_TOPIC, null, ethers.zeroPadValue(VITALIK, 32)] }),
    token.queryFilter(token.filters.Transfer(VITALIK), 0, "latest"),
  ]);
  // Signed transactions: a transfer, a token approval (EIP-1559), and a contract call with an access list.
  const nonce = await provider.getTransactionCount(wallet.address);
  const fees = { maxFeePerGas: 20000000000n, maxPriorityFeePerGas: 1000000000n, chainId };
  const transactions = [
    { to: VITALIK, value: 10n ** 16n, gasLimit: 21000n, nonce, type: 2, ...fees },
    { to: USDC, data: erc20.encodeFunctionData("approve", [PERMIT2, ethers.MaxUint256]), gasLimit: 60000n, nonce: nonce + 1, type: 2, ...fees },
    {
      to: USDC,
      data: erc20.encodeFunctionData("transfer", [VITALIK, 1000000n]),
      gasLimit: 80000n,
      nonce: nonce + 2,
      type: 1,
      gasPrice: 20000000000n,
      chainId,
      accessList: [{ address: USDC, storageKeys: [ethers.zeroPadValue("0x03", 32)] }],
    },
  ];
  for (const transaction of transactions) {
    await settle([provider.broadcastTransaction(await wallet.signTransaction(transaction))]);
  }
  // Typed data, as ethers' JsonRpcSigner asks a node-held account to sign it.
  const signer = await provider.getSigner(wallet.address);
  const one = permit(chainId, wallet.address);
  await settle([signer.signTypedData(one.domain, one.types, one.message)]);
  const two = permitBatch(chainId);
  await settle([signer.signTypedData(two.domain, two.types, two.message)]);
  await settle([signer.signMessage("Welcome to Example!\n\nClick to sign in and accept the Terms of Service.\n\nNonce: 8f1c2e")]);
  provider.destroy();
}

async function withViem() {
  const viem = require("viem");
  const { privateKeyToAccount } = require("viem/accounts");
  const account = privateKeyToAccount(privateKey);
  const transport = viem.http(url, { batch: { batchSize: 20, wait: 16 } });
  const client = viem.createPublicClient({ transport });
  const chainId = await client.getChainId();
  const chain = viem.defineChain({
    id: chainId,
    name: "test",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [url] } },
    contracts: { multicall3: { address: MULTICALL } },
  });
  const publicClient = viem.createPublicClient({ chain, transport });
  const wallet = viem.createWalletClient({ account, chain, transport });
  const erc20 = viem.parseAbi(ERC20);
  const router = viem.parseAbi(ROUTER);
  const holders = [account.address, VITALIK, V2_ROUTER, PERMIT2, WETH];
  await settle([
    publicClient.getBlockNumber(),
    publicClient.getBalance({ address: account.address }),
    publicClient.getTransactionCount({ address: account.address }),
    publicClient.estimateFeesPerGas(),
    ...holders.map((holder) => publicClient.readContract({ address: USDC, abi: erc20, functionName: "balanceOf", args: [holder] })),
    publicClient.readContract({ address: USDC, abi: erc20, functionName: "allowance", args: [account.address, PERMIT2] }),
    publicClient.getBlock({ blockTag: "latest", includeTransactions: true }),
    publicClient.getCode({ address: USDC }),
  ]);
  await settle([
    publicClient.multicall({
      allowFailure: true,
      contracts: holders.map((holder) => ({ address: USDC, abi: erc20, functionName: "balanceOf", args: [holder] })),
    }),
  ]);
  await settle([
    publicClient.call({
      account: account.address,
      to: V2_ROUTER,
      data: viem.encodeFunctionData({
        abi: router,
        functionName: "swapExactTokensForTokens",
        args: [10n ** 18n, 0n, [WETH, USDC, DAI], account.address, 1735689600n],
      }),
    }),
    publicClient.estimateGas({ account: account.address, to: VITALIK, value: 10n ** 15n }),
    publicClient.getLogs({
      address: [USDC, WETH],
      event: viem.parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)"),
      args: { from: VITALIK },
      fromBlock: 0n,
      toBlock: "latest",
    }),
    publicClient.getFeeHistory({ blockCount: 4, rewardPercentiles: [25, 75] }),
  ]);
  const request = await wallet.prepareTransactionRequest({ to: VITALIK, value: 10n ** 16n });
  await settle([wallet.sendRawTransaction({ serializedTransaction: await wallet.signTransaction(request) })]);
  const approval = await wallet.prepareTransactionRequest({
    to: USDC,
    data: viem.encodeFunctionData({ abi: erc20, functionName: "approve", args: [PERMIT2, viem.maxUint256] }),
  });
  await settle([wallet.sendRawTransaction({ serializedTransaction: await wallet.signTransaction(approval) })]);
  // Typed data and messages through a JSON-RPC account (the node's), as a dapp asks an injected wallet.
  const remote = viem.createWalletClient({ account: account.address, chain, transport });
  const one = permit(chainId, account.address);
  await settle([remote.signTypedData(one)]);
  await settle([remote.signTypedData(permitBatch(chainId))]);
  await settle([remote.signMessage({ message: "Sign in to Example\nNonce: 8f1c2e" })]);
}

(library === "viem" ? withViem() : withEthers()).then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
