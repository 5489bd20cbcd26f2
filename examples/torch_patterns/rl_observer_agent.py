"""torch's distributed reinforcement-learning RPC tutorial, ported: one agent, many observers.

Ports part 1 of "Getting Started with Distributed RPC Framework": the agent (rank
0) holds the policy and an RRef to an `Observer` on every other worker. Each
episode, the observers step their own environment and call back the agent through
its RRef, `select_action` for every step and `report_reward` after it; the agent
then updates the policy with REINFORCE, locally. gym is not a dependency: a numpy
CartPole with gym's dynamics and rewards stands in for `gym.make("CartPole-v1")`,
and a small `Categorical` replaces torch.distributions'. Each observer's random
draws come from its own seeds, so every run gives the same rewards.
Run: ``python examples/torch_patterns/rl_observer_agent.py [--episodes N]``.
"""
import argparse
import math
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")

import numpy as np  # noqa: E402

import actors as rpc  # noqa: E402
from torch_patterns._spawn import free_port, spawn  # noqa: E402
import engine as torch  # noqa: E402
from actors import RRef, remote, rpc_async, rpc_sync  # noqa: E402
from engine import nn, optim  # noqa: E402
from engine.nn import functional as F  # noqa: E402

AGENT_NAME = "agent"
OBSERVER_NAME = "obs{}"
TOTAL_EPISODE_STEP = 300
GAMMA = 0.99
SEED = 543


class CartPole:
    """gym's CartPole-v1: push a cart left or right to keep its pole upright."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.state = None

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        done = abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360
        return self.state.astype(np.float32), 1.0, done, {}


class Categorical:
    """torch.distributions.Categorical's sample and log_prob, for one row of probabilities."""

    def __init__(self, probs, rng):
        self.probs, self.rng = probs, rng

    def sample(self):
        p = self.probs.data[0].astype(np.float64)
        return int(self.rng.choice(len(p), p=p / p.sum()))

    def log_prob(self, action):
        return torch.log(self.probs[0, action])


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, axis=1)


def _call_method(method, rref, *args, **kwargs):
    return method(rref.local_value(), *args, **kwargs)


def _remote_method(method, rref, *args, **kwargs):
    args = [method, rref] + list(args)
    return rpc_sync(rref.owner(), _call_method, args=args, kwargs=kwargs)


class Observer:
    def __init__(self):
        self.id = rpc.get_worker_info().id
        self.env = CartPole(SEED + self.id)

    def run_episode(self, agent_rref, n_steps):
        state = self.env.reset()
        for _ in range(n_steps):
            action = _remote_method(Agent.select_action, agent_rref, self.id, state)
            state, reward, done, _ = self.env.step(action)
            _remote_method(Agent.report_reward, agent_rref, self.id, reward)
            if done:
                break


class Agent:
    def __init__(self, world_size):
        self.ob_rrefs = []
        self.agent_rref = RRef(self)
        self.rewards = {}
        self.saved_log_probs = {}
        torch.manual_seed(SEED)
        self.policy = Policy()
        self.optimizer = optim.Adam(self.policy.parameters(), lr=1e-2)
        self.eps = np.finfo(np.float32).eps.item()
        self.running_reward = 0
        self.lock = threading.Lock()  # observers call select_action at the same time
        self.calls = {}
        for ob_rank in range(1, world_size):
            ob_info = rpc.get_worker_info(OBSERVER_NAME.format(ob_rank))
            self.ob_rrefs.append(remote(ob_info, Observer))
            self.rewards[ob_info.id] = []
            self.saved_log_probs[ob_info.id] = []

    def select_action(self, ob_id, state):
        state = torch.from_numpy(state).reshape(1, 4)
        with self.lock:
            # Each observer's n-th call draws from its own seed, so a run repeats
            # whatever order the observers' calls arrive in.
            self.calls[ob_id] = self.calls.get(ob_id, 0) + 1
            rng = torch.manual_seed([SEED, ob_id, self.calls[ob_id]])
            probs = self.policy(state)
            m = Categorical(probs, rng)
            action = m.sample()
        self.saved_log_probs[ob_id].append(m.log_prob(action))
        return action

    def report_reward(self, ob_id, reward):
        self.rewards[ob_id].append(reward)

    def run_episode(self, n_steps=0):
        futs = []
        for ob_rref in self.ob_rrefs:
            futs.append(rpc_async(ob_rref.owner(), _call_method,
                                  args=(Observer.run_episode, ob_rref, self.agent_rref, n_steps)))
        for fut in futs:
            fut.wait()

    def finish_episode(self):
        R, probs, rewards = 0, [], []
        for ob_id in self.rewards:
            probs.extend(self.saved_log_probs[ob_id])
            rewards.extend(self.rewards[ob_id])
        min_reward = min([sum(self.rewards[ob_id]) for ob_id in self.rewards])
        self.running_reward = 0.05 * min_reward + (1 - 0.05) * self.running_reward
        for ob_id in self.rewards:
            self.rewards[ob_id] = []
            self.saved_log_probs[ob_id] = []
        policy_loss, returns = [], []
        for r in rewards[::-1]:
            R = r + GAMMA * R
            returns.insert(0, R)
        returns = np.array(returns)
        returns = (returns - returns.mean()) / (returns.std() + self.eps)
        for log_prob, R in zip(probs, returns):
            policy_loss.append(-log_prob * float(R))
        self.optimizer.zero_grad()
        policy_loss = torch.stack(policy_loss).sum()
        policy_loss.backward()
        self.optimizer.step()
        return min_reward


def run_worker(rank, world_size, port, episodes, log_interval):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    if rank == 0:
        rpc.init_rpc(AGENT_NAME, rank=rank, world_size=world_size)
        agent = Agent(world_size)
        first = None
        for i_episode in range(1, episodes + 1):
            n_steps = int(TOTAL_EPISODE_STEP / (world_size - 1))
            agent.run_episode(n_steps=n_steps)
            last_reward = agent.finish_episode()
            first = last_reward if first is None else first
            if i_episode % log_interval == 0:
                print(f"Episode {i_episode}\tLast reward: {last_reward:5.1f}\t"
                      f"Average reward: {agent.running_reward:.2f}", flush=True)
        print(f"reward of the worst observer: first episode {first:.0f}, "
              f"running average {agent.running_reward:.1f}", flush=True)
    else:
        rpc.init_rpc(OBSERVER_NAME.format(rank), rank=rank, world_size=world_size)
    rpc.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--world-size", type=int, default=3, help="the agent + observers")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--log-interval", type=int, default=25)
    args = parser.parse_args()
    spawn(run_worker, args=(args.world_size, free_port(), args.episodes, args.log_interval),
          nprocs=args.world_size)
