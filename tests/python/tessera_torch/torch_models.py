"""The PyTorch modules of torch_check.sh: three that Tessera takes (an MLP,
a CNN with BatchNorm, two inputs with an EmbeddingBag and a concatenation)
and five it refuses by name."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """The course's Fashion-MNIST MLP."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


class CNN(nn.Module):
    """Two convolutions with BatchNorm, a pool and a flatten of 16 channels
    (PyTorch's channels-first order) read by a Linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.bn2 = nn.BatchNorm2d(16)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(16 * 12 * 12, 32)
        self.norm = nn.LayerNorm(32)
        self.out = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.out(torch.tanh(self.norm(self.fc(self.flat(x)))))


class TwoInput(nn.Module):
    """A click model: 13 dense features and a bag of 4 ids, concatenated."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(50, 8, mode="mean")
        self.dense = nn.Linear(13, 8)
        self.bn = nn.BatchNorm1d(16)
        self.top = nn.Linear(16, 1)

    def forward(self, dense, ids):
        d = torch.sigmoid(self.dense(dense))
        x = torch.cat([d, self.bag(ids) * d], dim=1)
        return self.top(self.bn(x))


class Embed(nn.Module):
    """One id per example through nn.Embedding ([N, 1, 4], squeezed),
    added to a Linear of 4 features, and a reshape."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 4)
        self.fc = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.head = nn.Linear(4, 3)

    def forward(self, x, ids):
        e = self.emb(ids).squeeze(1)
        h = torch.relu(self.fc(x) + e)
        return self.head(self.norm(h.reshape(-1, 4)))


# Refused.
class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(13, 8, batch_first=True)
        self.fc = nn.Linear(8, 1)

    def forward(self, x):
        y, _ = self.lstm(x.unsqueeze(1))
        return self.fc(y[:, -1])


class _Clip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, g):
        return g


class CustomFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(13, 1)

    def forward(self, x):
        return self.fc(_Clip.apply(x))


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(13, 1)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return -self.fc(x)


class PaddingIdx(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(50, 8, padding_idx=0)
        self.fc = nn.Linear(8, 1)

    def forward(self, ids):
        return self.fc(self.emb(ids))


class ChannelsLast(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(4 * 26 * 26, 10)

    def forward(self, x):
        return self.fc(self.flat(self.conv(x)))


def make_sgd(params):
    return torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True)


def make_rmsprop(params):
    return torch.optim.RMSprop(params, lr=0.01)


loss_fn = nn.CrossEntropyLoss()
nll = nn.NLLLoss()
